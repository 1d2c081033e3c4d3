package com.acme.shop.model;

/**
 * A product that can be ordered. Stock is tracked per product.
 */
public class Product extends Entity {

    private final String sku;
    private String name;
    private String category;
    private Money price;
    private int stock;

    public Product(String sku, String name, String category, Money price, int stock) {
        this.sku = requireText(sku, "sku").toUpperCase();
        this.name = requireText(name, "name");
        this.category = requireText(category, "category");
        this.price = requireValue(price, "price");
        if (stock < 0) {
            throw new IllegalArgumentException("stock must not be negative");
        }
        this.stock = stock;
    }

    public String getSku() {
        return sku;
    }

    public String getName() {
        return name;
    }

    public void rename(String newName) {
        this.name = requireText(newName, "name");
        touch();
    }

    public String getCategory() {
        return category;
    }

    public Money getPrice() {
        return price;
    }

    public void changePrice(Money newPrice) {
        this.price = requireValue(newPrice, "price");
        touch();
    }

    public int getStock() {
        return stock;
    }

    public boolean isInStock() {
        return stock > 0;
    }

    /** Removes the quantity from stock, failing if not enough is available. */
    public void reserve(int quantity) {
        if (quantity > stock) {
            throw new IllegalStateException("Not enough stock for " + sku + ": " + stock + " < " + quantity);
        }
        this.stock -= quantity;
        touch();
    }

    public void restock(int quantity) {
        if (quantity <= 0) {
            throw new IllegalArgumentException("quantity must be positive");
        }
        this.stock += quantity;
        touch();
    }

    @Override
    public String displayName() {
        return sku + " " + name;
    }
}
