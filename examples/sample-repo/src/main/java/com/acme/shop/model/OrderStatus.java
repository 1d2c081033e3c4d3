package com.acme.shop.model;

/**
 * Lifecycle of an {@link Order}. The code is what the web layer sends and receives.
 */
public enum OrderStatus {

    NEW("new", true),
    PAID("paid", true),
    SHIPPED("shipped", false),
    DELIVERED("delivered", false),
    CANCELLED("cancelled", false);

    private final String code;
    private final boolean cancellable;

    OrderStatus(String code, boolean cancellable) {
        this.code = code;
        this.cancellable = cancellable;
    }

    public String getCode() {
        return code;
    }

    public boolean isCancellable() {
        return cancellable;
    }

    public boolean isFinal() {
        return this == DELIVERED || this == CANCELLED;
    }

    /** Only forward transitions are allowed; cancelling is allowed while cancellable. */
    public boolean canTransitionTo(OrderStatus next) {
        if (next == CANCELLED) {
            return cancellable;
        }
        return switch (this) {
            case NEW -> next == PAID;
            case PAID -> next == SHIPPED;
            case SHIPPED -> next == DELIVERED;
            case DELIVERED, CANCELLED -> false;
        };
    }

    public static OrderStatus fromCode(String code) {
        for (OrderStatus status : values()) {
            if (status.code.equalsIgnoreCase(code)) {
                return status;
            }
        }
        throw new IllegalArgumentException("Unknown order status: " + code);
    }
}
