package com.acme.shop.model;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A customer order consisting of one or more {@link OrderLine}s.
 */
public class Order extends Entity {

    private final Long customerId;
    private final List<OrderLine> lines = new ArrayList<>();
    private OrderStatus status = OrderStatus.NEW;
    private Address shippingAddress;
    private String note;

    public Order(Long customerId, Address shippingAddress) {
        this.customerId = requireValue(customerId, "customerId");
        this.shippingAddress = shippingAddress;
    }

    public static Builder builder(Long customerId) {
        return new Builder(customerId);
    }

    public Long getCustomerId() {
        return customerId;
    }

    public List<OrderLine> getLines() {
        return Collections.unmodifiableList(lines);
    }

    public void addLine(OrderLine line) {
        lines.add(requireValue(line, "line"));
        touch();
    }

    public boolean removeLine(Long productId) {
        boolean removed = lines.removeIf(line -> line.isFor(productId));
        if (removed) {
            touch();
        }
        return removed;
    }

    public OrderStatus getStatus() {
        return status;
    }

    /** Moves the order to the next status, enforcing the allowed transitions. */
    public void changeStatus(OrderStatus next) {
        if (!status.canTransitionTo(next)) {
            throw new IllegalStateException("Cannot change order " + getId() + " from " + status + " to " + next);
        }
        this.status = next;
        touch();
    }

    public Address getShippingAddress() {
        return shippingAddress;
    }

    public String getNote() {
        return note;
    }

    public void setNote(String note) {
        this.note = note;
        touch();
    }

    public int itemCount() {
        return lines.stream().mapToInt(OrderLine::quantity).sum();
    }

    public Money subtotal() {
        return lines.stream().map(OrderLine::total).reduce(Money.ZERO, Money::plus);
    }

    @Override
    public String displayName() {
        return "Order " + getId() + " (" + status.getCode() + ", " + itemCount() + " items)";
    }

    /** Fluent builder used by the service layer to assemble new orders. */
    public static final class Builder {
        private final Long customerId;
        private final List<OrderLine> lines = new ArrayList<>();
        private Address shippingAddress;
        private String note;

        private Builder(Long customerId) {
            this.customerId = customerId;
        }

        public Builder line(Product product, int quantity) {
            lines.add(OrderLine.of(product, quantity));
            return this;
        }

        public Builder shipTo(Address address) {
            this.shippingAddress = address;
            return this;
        }

        public Builder note(String text) {
            this.note = text;
            return this;
        }

        public Order build() {
            Order order = new Order(customerId, shippingAddress);
            lines.forEach(order::addLine);
            order.note = note;
            return order;
        }
    }
}
