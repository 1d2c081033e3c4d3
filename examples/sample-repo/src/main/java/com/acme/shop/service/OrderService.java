package com.acme.shop.service;

import com.acme.shop.model.*;
import com.acme.shop.pricing.PriceCalculator;
import com.acme.shop.pricing.PriceQuote;
import com.acme.shop.repository.CustomerRepository;
import com.acme.shop.repository.OrderRepository;
import com.acme.shop.repository.ProductRepository;

import java.util.List;
import java.util.Map;

/**
 * Places orders and moves them through their lifecycle.
 */
public class OrderService extends BaseService {

    public static final String SUBJECT_CONFIRMED = "Your order has been received";
    public static final String SUBJECT_SHIPPED = "Your order is on its way";
    public static final String SUBJECT_CANCELLED = "Your order was cancelled";

    private final OrderRepository orderRepository;
    private final CustomerRepository customerRepository;
    private final ProductRepository productRepository;
    private final PriceCalculator priceCalculator;
    private final OrderValidator validator = new OrderValidator();

    public OrderService(OrderRepository orderRepository, CustomerRepository customerRepository,
                        ProductRepository productRepository, PriceCalculator priceCalculator, Notifier notifier) {
        super(notifier);
        this.orderRepository = orderRepository;
        this.customerRepository = customerRepository;
        this.productRepository = productRepository;
        this.priceCalculator = priceCalculator;
    }

    /** Creates an order from product id to quantity, reserves stock and sends a confirmation. */
    public Order placeOrder(Long customerId, Map<Long, Integer> quantities, String note) {
        Customer customer = loadCustomer(customerId);
        check(customer.isActive(), "Customer " + customerId + " is not active");
        Order.Builder builder = Order.builder(customerId).shipTo(customer.getAddress()).note(note);
        for (Map.Entry<Long, Integer> entry : quantities.entrySet()) {
            Product product = require(productRepository.findById(entry.getKey()), "Product", entry.getKey());
            check(product.getStock() >= entry.getValue(), "Not enough stock for " + product.getSku());
            builder.line(product, entry.getValue());
        }
        Order order = builder.build();
        validator.validateOrThrow(order);
        for (OrderLine line : order.getLines()) {
            productRepository.getOrThrow(line.productId()).reserve(line.quantity());
        }
        orderRepository.save(order);
        audit("PLACE", order);
        PriceQuote quote = priceCalculator.quote(order, customer);
        notifyCustomer(customer, SUBJECT_CONFIRMED, "we received " + order.displayName() + ".\n" + quote.summary());
        return order;
    }

    public PriceQuote quote(Long orderId) {
        Order order = loadOrder(orderId);
        return priceCalculator.quote(order, loadCustomer(order.getCustomerId()));
    }

    /** Marks the order as paid and credits one loyalty point per full euro. */
    public Order pay(Long orderId) {
        Order order = loadOrder(orderId);
        Customer customer = loadCustomer(order.getCustomerId());
        Money total = priceCalculator.calculate(order, customer);
        transition(order, OrderStatus.PAID);
        customer.addLoyaltyPoints(total.amount().intValue());
        return order;
    }

    public Order ship(Long orderId) {
        Order order = loadOrder(orderId);
        transition(order, OrderStatus.SHIPPED);
        notifyCustomer(loadCustomer(order.getCustomerId()), SUBJECT_SHIPPED,
                "your order will be delivered to " + order.getShippingAddress().format() + ".");
        return order;
    }

    public Order cancel(Long orderId, String reason) {
        Order order = loadOrder(orderId);
        check(order.getStatus().isCancellable(), "Order " + orderId + " can no longer be cancelled");
        for (OrderLine line : order.getLines()) {
            productRepository.findById(line.productId()).ifPresent(p -> p.restock(line.quantity()));
        }
        transition(order, OrderStatus.CANCELLED);
        notifyCustomer(loadCustomer(order.getCustomerId()), SUBJECT_CANCELLED, "reason: " + reason);
        return order;
    }

    public List<Order> findOrdersForCustomer(Long customerId) {
        return orderRepository.findByCustomerId(customerId);
    }

    public Map<OrderStatus, Long> statusReport() {
        return orderRepository.countByStatus();
    }

    private void transition(Order order, OrderStatus next) {
        if (!order.getStatus().canTransitionTo(next)) {
            throw ServiceException.conflict("Order " + order.getId() + " is " + order.getStatus().getCode());
        }
        order.changeStatus(next);
        orderRepository.save(order);
        audit(next.name(), order);
    }

    private Order loadOrder(Long orderId) {
        return require(orderRepository.findById(orderId), "Order", orderId);
    }

    private Customer loadCustomer(Long customerId) {
        return require(customerRepository.findById(customerId), "Customer", customerId);
    }
}
