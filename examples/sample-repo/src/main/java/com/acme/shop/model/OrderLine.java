package com.acme.shop.model;

/**
 * One line of an order: a product snapshot with quantity and unit price.
 */
public record OrderLine(Long productId, String productName, int quantity, Money unitPrice) {

    public static final int MAX_QUANTITY = 99;

    public OrderLine {
        if (productId == null) {
            throw new IllegalArgumentException("productId must not be null");
        }
        if (quantity < 1 || quantity > MAX_QUANTITY) {
            throw new IllegalArgumentException("quantity out of range: " + quantity);
        }
        if (unitPrice == null) {
            throw new IllegalArgumentException("unitPrice must not be null");
        }
    }

    public static OrderLine of(Product product, int quantity) {
        return new OrderLine(product.getId(), product.getName(), quantity, product.getPrice());
    }

    public Money total() {
        return unitPrice.times(quantity);
    }

    public OrderLine withQuantity(int newQuantity) {
        return new OrderLine(productId, productName, newQuantity, unitPrice);
    }

    public boolean isFor(Long otherProductId) {
        return productId.equals(otherProductId);
    }

    public String describe() {
        return quantity + " x " + productName + " @ " + unitPrice.format();
    }
}
