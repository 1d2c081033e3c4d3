package com.acme.shop.service;

import com.acme.shop.model.Money;
import com.acme.shop.model.Product;
import com.acme.shop.repository.ProductRepository;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;

/**
 * Maintains the product catalogue and its stock levels.
 */
public class ProductService extends BaseService {

    private final ProductRepository productRepository;

    public ProductService(ProductRepository productRepository, Notifier notifier) {
        super(notifier);
        this.productRepository = productRepository;
    }

    public Product addProduct(String sku, String name, String category, Money price, int stock) {
        if (productRepository.findBySku(sku).isPresent()) {
            throw ServiceException.conflict("SKU already exists: " + sku);
        }
        Product product = productRepository.save(new Product(sku, name, category, price, stock));
        audit("ADD", product);
        return product;
    }

    public Product get(Long productId) {
        return require(productRepository.findById(productId), "Product", productId);
    }

    public Product restock(Long productId, int quantity) {
        check(quantity > 0, "Restock quantity must be positive");
        Product product = get(productId);
        product.restock(quantity);
        audit("RESTOCK", product);
        return product;
    }

    public Product changePrice(Long productId, Money newPrice) {
        check(!newPrice.isZero(), "Price must not be zero");
        Product product = get(productId);
        product.changePrice(newPrice);
        audit("PRICE", product);
        return product;
    }

    public List<Product> search(String query) {
        return productRepository.searchByName(query);
    }

    public List<Product> lowStock() {
        return productRepository.findLowStock();
    }

    /** All products grouped by category, categories sorted by name. */
    public Map<String, List<Product>> catalogue() {
        return productRepository.findAll().stream()
                .collect(Collectors.groupingBy(Product::getCategory, TreeMap::new, Collectors.toList()));
    }
}
