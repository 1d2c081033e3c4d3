package com.acme.shop.pricing;

import com.acme.shop.model.Money;

import java.util.List;

/**
 * Result of a price calculation: the subtotal, each adjustment and the total.
 */
public record PriceQuote(Money subtotal, List<Adjustment> adjustments, Money total) {

    public PriceQuote {
        adjustments = List.copyOf(adjustments);
    }

    /** The effect of one {@link PriceRule} on the running total. */
    public record Adjustment(String rule, Money before, Money after) {

        public Money difference() {
            return after.minus(before);
        }

        public boolean isDiscount() {
            return before.isGreaterThan(after);
        }
    }

    public Money totalDiscount() {
        return adjustments.stream()
                .filter(Adjustment::isDiscount)
                .map(adjustment -> adjustment.before().minus(adjustment.after()))
                .reduce(Money.ZERO, Money::plus);
    }

    public String summary() {
        StringBuilder text = new StringBuilder("Subtotal: ").append(subtotal.format());
        for (Adjustment adjustment : adjustments) {
            text.append("\n  ").append(adjustment.rule()).append(": ").append(adjustment.difference().format());
        }
        return text.append("\nTotal: ").append(total.format()).toString();
    }
}
