package com.acme.shop.repository;

import com.acme.shop.model.Customer;
import com.acme.shop.util.TextUtil;

import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * Stores customers. E-mail addresses are unique and compared case-insensitively.
 */
public class CustomerRepository extends AbstractRepository<Customer> {

    @Override
    protected String entityName() {
        return "Customer";
    }

    public Optional<Customer> findByEmail(String email) {
        String wanted = TextUtil.normalize(email);
        return findFirstWhere(customer -> customer.getEmail().equals(wanted));
    }

    public boolean existsByEmail(String email) {
        return findByEmail(email).isPresent();
    }

    public List<Customer> findActive() {
        return findWhere(Customer::isActive);
    }

    public List<Customer> findByCity(String city) {
        String wanted = TextUtil.normalize(city);
        return findWhere(customer -> TextUtil.normalize(customer.getAddress().city()).equals(wanted));
    }

    /** VIP customers ordered by loyalty points, highest first. */
    public List<Customer> findVips() {
        return findWhereSorted(Customer::isVip,
                Comparator.comparingInt(Customer::getLoyaltyPoints).reversed());
    }
}
