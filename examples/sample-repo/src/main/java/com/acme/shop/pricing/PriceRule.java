package com.acme.shop.pricing;

import com.acme.shop.model.Customer;
import com.acme.shop.model.Money;
import com.acme.shop.model.Order;

/**
 * A single step of price calculation. Rules are applied in ascending
 * {@link #priority()} order, each one receiving the running total.
 */
public interface PriceRule {

    int DEFAULT_PRIORITY = 100;

    /** Returns the new running total after applying this rule. */
    Money apply(Order order, Customer customer, Money current);

    /** Short name shown in the price breakdown, e.g. "vip-discount". */
    String name();

    default int priority() {
        return DEFAULT_PRIORITY;
    }

    default boolean appliesTo(Order order, Customer customer) {
        return true;
    }

    /** Applies the rule only when {@link #appliesTo(Order, Customer)} holds. */
    default Money applyIfRelevant(Order order, Customer customer, Money current) {
        return appliesTo(order, customer) ? apply(order, customer, current) : current;
    }
}
