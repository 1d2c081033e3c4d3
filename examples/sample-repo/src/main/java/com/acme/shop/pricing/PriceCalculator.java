package com.acme.shop.pricing;

import com.acme.shop.model.*;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Applies all configured {@link PriceRule}s to an order.
 */
public class PriceCalculator {

    private final List<PriceRule> rules = new ArrayList<>();

    public PriceCalculator(List<PriceRule> rules) {
        rules.forEach(this::addRule);
    }

    /** The rules used by the shop: VIP and bulk discounts plus shipping. */
    public static PriceCalculator defaultCalculator() {
        return new PriceCalculator(List.of(
                PercentageDiscountRule.vip(5),
                new BulkDiscountRule(3),
                new ShippingFeeRule()));
    }

    public void addRule(PriceRule rule) {
        rules.add(rule);
        rules.sort(Comparator.comparingInt(PriceRule::priority));
    }

    public List<PriceRule> getRules() {
        return List.copyOf(rules);
    }

    public Money calculate(Order order, Customer customer) {
        return quote(order, customer).total();
    }

    /** Calculates the total and records how each applicable rule changed it. */
    public PriceQuote quote(Order order, Customer customer) {
        if (order.getLines().isEmpty()) {
            return new PriceQuote(Money.ZERO, List.of(), Money.ZERO);
        }
        Money subtotal = order.subtotal();
        Money current = subtotal;
        List<PriceQuote.Adjustment> adjustments = new ArrayList<>();
        for (PriceRule rule : rules) {
            if (!rule.appliesTo(order, customer)) {
                continue;
            }
            Money next = rule.apply(order, customer, current);
            if (!next.equals(current)) {
                adjustments.add(new PriceQuote.Adjustment(rule.name(), current, next));
            }
            current = next;
        }
        return new PriceQuote(subtotal, adjustments, current);
    }

    public Money lineTotal(OrderLine line) {
        return line.total();
    }
}
