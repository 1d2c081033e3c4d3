package com.acme.shop.service;

import com.acme.shop.model.Address;
import com.acme.shop.model.Customer;
import com.acme.shop.repository.CustomerRepository;
import com.acme.shop.repository.OrderRepository;
import com.acme.shop.util.TextUtil;

import java.util.List;
import java.util.Optional;

/**
 * Registration and maintenance of customer accounts.
 */
public class CustomerService extends BaseService {

    public static final String SUBJECT_WELCOME = "Welcome to ACME Shop";
    public static final int WELCOME_POINTS = 50;

    private final CustomerRepository customerRepository;
    private final OrderRepository orderRepository;

    public CustomerService(CustomerRepository customerRepository, OrderRepository orderRepository, Notifier notifier) {
        super(notifier);
        this.customerRepository = customerRepository;
        this.orderRepository = orderRepository;
    }

    public Customer register(String name, String email, Address address) {
        check(!TextUtil.isBlank(email) && email.contains("@"), "Invalid e-mail address: " + email);
        if (customerRepository.existsByEmail(email)) {
            throw ServiceException.conflict("E-mail already registered: " + email);
        }
        Customer customer = customerRepository.save(new Customer(name, email, address));
        customer.addLoyaltyPoints(WELCOME_POINTS);
        audit("REGISTER", customer);
        notifyCustomer(customer, SUBJECT_WELCOME, "thanks for registering. We added " + WELCOME_POINTS + " points.");
        return customer;
    }

    public Customer get(Long customerId) {
        return require(customerRepository.findById(customerId), "Customer", customerId);
    }

    public Optional<Customer> findByEmail(String email) {
        return customerRepository.findByEmail(email);
    }

    public Customer move(Long customerId, Address newAddress) {
        Customer customer = get(customerId);
        customer.moveTo(newAddress);
        audit("MOVE", customer);
        return customerRepository.save(customer);
    }

    /** Deactivates the account; refused while the customer has open orders. */
    public void deactivate(Long customerId) {
        Customer customer = get(customerId);
        boolean hasOpenOrders = orderRepository.findByCustomerId(customerId).stream()
                .anyMatch(order -> !order.getStatus().isFinal());
        check(!hasOpenOrders, "Customer " + customerId + " still has open orders");
        customer.deactivate();
        audit("DEACTIVATE", customer);
    }

    public List<Customer> topCustomers(int limit) {
        return customerRepository.findVips().stream().limit(limit).toList();
    }

    public List<Customer> customersIn(String city) {
        return customerRepository.findByCity(city);
    }
}
