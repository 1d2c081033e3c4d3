package com.acme.shop.pricing;

import com.acme.shop.model.Address;
import com.acme.shop.model.Customer;
import com.acme.shop.model.Money;
import com.acme.shop.model.Order;

/**
 * Adds shipping costs unless the order qualifies for free shipping.
 * Runs last so that discounts are taken into account.
 */
public class ShippingFeeRule implements PriceRule {

    public static final Money FREE_SHIPPING_FROM = Money.of("50.00");
    public static final Money DOMESTIC_FEE = Money.of("4.90");
    public static final Money INTERNATIONAL_FEE = Money.of("14.90");

    @Override
    public String name() {
        return "shipping";
    }

    @Override
    public int priority() {
        return 1000;
    }

    @Override
    public Money apply(Order order, Customer customer, Money current) {
        if (current.isGreaterThan(FREE_SHIPPING_FROM) && isDomestic(order, customer)) {
            return current;
        }
        return current.plus(feeFor(order, customer));
    }

    Money feeFor(Order order, Customer customer) {
        return isDomestic(order, customer) ? DOMESTIC_FEE : INTERNATIONAL_FEE;
    }

    private boolean isDomestic(Order order, Customer customer) {
        Address target = order.getShippingAddress() != null
                ? order.getShippingAddress()
                : customer.getAddress();
        return target.isDomestic();
    }
}
