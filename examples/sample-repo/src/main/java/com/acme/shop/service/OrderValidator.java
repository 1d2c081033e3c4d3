package com.acme.shop.service;

import com.acme.shop.model.Order;
import com.acme.shop.model.OrderLine;
import com.acme.shop.util.TextUtil;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Checks an {@link Order} before it is stored. Error messages start with the
 * name of the offending field.
 */
public class OrderValidator {

    public static final String FIELD_CUSTOMER_ID = "customerId";
    public static final String FIELD_LINES = "lines";
    public static final String FIELD_SHIPPING_ADDRESS = "shippingAddress";
    public static final String FIELD_NOTE = "note";

    public static final int MAX_LINES = 50;
    public static final int MAX_NOTE_LENGTH = 500;

    public List<String> validate(Order order) {
        List<String> errors = new ArrayList<>();
        if (order.getCustomerId() == null) {
            errors.add(FIELD_CUSTOMER_ID + " is required");
        }
        if (order.getLines().isEmpty()) {
            errors.add(FIELD_LINES + " must not be empty");
        } else if (order.getLines().size() > MAX_LINES) {
            errors.add(FIELD_LINES + " must not contain more than " + MAX_LINES + " entries");
        }
        Set<Long> seenProducts = new HashSet<>();
        for (OrderLine line : order.getLines()) {
            if (!seenProducts.add(line.productId())) {
                errors.add(FIELD_LINES + ": product " + line.productId() + " appears twice");
            }
            if (line.unitPrice().isZero()) {
                errors.add(FIELD_LINES + ": product " + line.productId() + " has no price");
            }
        }
        if (order.getShippingAddress() == null) {
            errors.add(FIELD_SHIPPING_ADDRESS + " is required");
        }
        String note = order.getNote();
        if (!TextUtil.isBlank(note) && note.length() > MAX_NOTE_LENGTH) {
            errors.add(FIELD_NOTE + " must be at most " + MAX_NOTE_LENGTH + " characters");
        }
        return errors;
    }

    public boolean isValid(Order order) {
        return validate(order).isEmpty();
    }

    /** Throws a {@link ServiceException} listing every problem found. */
    public void validateOrThrow(Order order) {
        List<String> errors = validate(order);
        if (!errors.isEmpty()) {
            throw ServiceException.invalid(String.join("; ", errors));
        }
    }
}
