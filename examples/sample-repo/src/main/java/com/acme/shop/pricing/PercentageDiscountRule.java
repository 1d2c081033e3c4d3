package com.acme.shop.pricing;

import com.acme.shop.model.Customer;
import com.acme.shop.model.Money;
import com.acme.shop.model.Order;

/**
 * Takes a fixed percentage off the running total, optionally only for VIP customers.
 */
public class PercentageDiscountRule implements PriceRule {

    public static final int MAX_PERCENT = 50;

    private final String name;
    private final int percent;
    private final boolean vipOnly;

    public PercentageDiscountRule(String name, int percent, boolean vipOnly) {
        if (percent <= 0 || percent > MAX_PERCENT) {
            throw new IllegalArgumentException("percent must be in 1.." + MAX_PERCENT + ": " + percent);
        }
        this.name = name;
        this.percent = percent;
        this.vipOnly = vipOnly;
    }

    public static PercentageDiscountRule vip(int percent) {
        return new PercentageDiscountRule("vip-discount", percent, true);
    }

    public int getPercent() {
        return percent;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public boolean appliesTo(Order order, Customer customer) {
        return !vipOnly || customer.isVip();
    }

    @Override
    public Money apply(Order order, Customer customer, Money current) {
        return discount(current);
    }

    /** Subtracts {@link #getPercent()} percent of the amount, never going below zero. */
    protected Money discount(Money amount) {
        Money reduced = amount.minus(amount.percentage(percent));
        return reduced.isGreaterThan(Money.ZERO) ? reduced : Money.ZERO;
    }
}
