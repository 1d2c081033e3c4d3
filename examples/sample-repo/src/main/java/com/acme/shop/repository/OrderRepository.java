package com.acme.shop.repository;

import com.acme.shop.model.Order;
import com.acme.shop.model.OrderStatus;

import java.time.Instant;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * Stores orders and answers the queries the order service needs.
 */
public class OrderRepository extends AbstractRepository<Order> {

    private static final Comparator<Order> NEWEST_FIRST =
            Comparator.comparing(Order::getCreatedAt).reversed();

    @Override
    protected String entityName() {
        return "Order";
    }

    public List<Order> findByCustomerId(Long customerId) {
        return findWhereSorted(order -> order.getCustomerId().equals(customerId), NEWEST_FIRST);
    }

    public List<Order> findByStatus(OrderStatus status) {
        return findWhere(order -> order.getStatus() == status);
    }

    /** Orders that are neither delivered nor cancelled. */
    public List<Order> findOpenOrders() {
        return findWhereSorted(order -> !order.getStatus().isFinal(), NEWEST_FIRST);
    }

    public List<Order> findPlacedBetween(Instant from, Instant to) {
        return findWhere(order -> !order.getCreatedAt().isBefore(from) && order.getCreatedAt().isBefore(to));
    }

    public long countByCustomerId(Long customerId) {
        return countWhere(order -> order.getCustomerId().equals(customerId));
    }

    public Map<OrderStatus, Long> countByStatus() {
        Map<OrderStatus, Long> counts = new EnumMap<>(OrderStatus.class);
        for (OrderStatus status : OrderStatus.values()) {
            counts.put(status, countWhere(order -> order.getStatus() == status));
        }
        return counts;
    }
}
