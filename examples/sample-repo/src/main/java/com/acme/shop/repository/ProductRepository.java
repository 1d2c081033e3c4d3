package com.acme.shop.repository;

import com.acme.shop.model.Product;
import com.acme.shop.util.TextUtil;

import java.util.Comparator;
import java.util.List;
import java.util.Optional;

/**
 * Stores the product catalogue.
 */
public class ProductRepository extends AbstractRepository<Product> {

    public static final int DEFAULT_LOW_STOCK = 5;

    @Override
    protected String entityName() {
        return "Product";
    }

    public Optional<Product> findBySku(String sku) {
        return findFirstWhere(product -> product.getSku().equalsIgnoreCase(sku));
    }

    public List<Product> findByCategory(String category) {
        return findWhereSorted(product -> product.getCategory().equalsIgnoreCase(category),
                Comparator.comparing(Product::getName));
    }

    public List<Product> findLowStock(int threshold) {
        return findWhereSorted(product -> product.getStock() <= threshold,
                Comparator.comparingInt(Product::getStock));
    }

    public List<Product> findLowStock() {
        return findLowStock(DEFAULT_LOW_STOCK);
    }

    /** Case- and accent-insensitive substring search on the product name. */
    public List<Product> searchByName(String query) {
        String needle = TextUtil.normalize(query);
        if (needle.isEmpty()) {
            return List.of();
        }
        return findWhere(product -> TextUtil.normalize(product.getName()).contains(needle));
    }
}
