package com.acme.shop.pricing;

import com.acme.shop.model.Customer;
import com.acme.shop.model.Money;
import com.acme.shop.model.Order;

/**
 * A percentage discount granted when an order contains many items.
 */
public class BulkDiscountRule extends PercentageDiscountRule {

    public static final int DEFAULT_MIN_ITEMS = 10;

    private final int minItems;

    public BulkDiscountRule(int percent, int minItems) {
        super("bulk-discount", percent, false);
        this.minItems = minItems;
    }

    public BulkDiscountRule(int percent) {
        this(percent, DEFAULT_MIN_ITEMS);
    }

    public int getMinItems() {
        return minItems;
    }

    @Override
    public boolean appliesTo(Order order, Customer customer) {
        return order.itemCount() >= minItems && super.appliesTo(order, customer);
    }

    @Override
    public Money apply(Order order, Customer customer, Money current) {
        // very large orders get the discount twice
        Money once = discount(current);
        return order.itemCount() >= minItems * 5 ? discount(once) : once;
    }

    @Override
    public int priority() {
        return DEFAULT_PRIORITY - 10;
    }
}
