package com.acme.shop.web;

import com.acme.shop.model.Money;
import com.acme.shop.model.Product;
import com.acme.shop.service.ProductService;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * HTTP endpoints under {@code /api/products}.
 */
public class ProductController extends BaseController {

    private final ProductService productService;

    public ProductController(ProductService productService) {
        this.productService = productService;
    }

    @Override
    public String basePath() {
        return ApiKeys.ROUTE_PRODUCTS;
    }

    public ApiResponse add(Map<String, String> params) {
        return handle(() -> {
            Product product = productService.addProduct(
                    requireParam(params, ApiKeys.PARAM_SKU),
                    requireParam(params, ApiKeys.PARAM_NAME),
                    requireParam(params, ApiKeys.PARAM_CATEGORY),
                    Money.of(requireParam(params, ApiKeys.PARAM_PRICE)),
                    intParam(params, ApiKeys.PARAM_QUANTITY, 0));
            return ApiResponse.created(toBody(product));
        });
    }

    public ApiResponse restock(Map<String, String> params) {
        return handle(() -> {
            Long productId = requireId(params, ApiKeys.PARAM_ID);
            int quantity = intParam(params, ApiKeys.PARAM_QUANTITY, 1);
            return ApiResponse.ok(toBody(productService.restock(productId, quantity)));
        });
    }

    public ApiResponse search(Map<String, String> params) {
        return handle(() -> {
            String query = requireParam(params, ApiKeys.PARAM_QUERY);
            return ApiResponse.ok(fields(ApiKeys.KEY_PRODUCTS, toBodies(productService.search(query))));
        });
    }

    public ApiResponse lowStock() {
        return ApiResponse.ok(fields(ApiKeys.KEY_PRODUCTS, toBodies(productService.lowStock())));
    }

    /** Products grouped by category; each category maps to its product list. */
    public ApiResponse catalogue() {
        Map<String, Object> body = new LinkedHashMap<>();
        productService.catalogue().forEach((category, products) -> body.put(category, toBodies(products)));
        return ApiResponse.ok(body);
    }

    private List<Map<String, Object>> toBodies(List<Product> products) {
        return products.stream().map(this::toBody).toList();
    }

    private Map<String, Object> toBody(Product product) {
        return fields(
                ApiKeys.KEY_PRODUCT_ID, product.getId(),
                ApiKeys.PARAM_SKU, product.getSku(),
                ApiKeys.PARAM_NAME, product.getName(),
                ApiKeys.PARAM_PRICE, product.getPrice().format(),
                ApiKeys.KEY_STOCK, product.getStock());
    }
}
