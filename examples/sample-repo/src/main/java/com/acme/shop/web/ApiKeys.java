package com.acme.shop.web;

/**
 * Routes, request parameter names and response keys of the shop API.
 * Keep these in sync with the API documentation.
 */
public final class ApiKeys {

    // routes
    public static final String ROUTE_ORDERS = "/api/orders";
    public static final String ROUTE_CUSTOMERS = "/api/customers";
    public static final String ROUTE_PRODUCTS = "/api/products";

    // request parameters
    public static final String PARAM_ID = "id";
    public static final String PARAM_CUSTOMER_ID = "customerId";
    public static final String PARAM_ITEMS = "items";
    public static final String PARAM_NOTE = "note";
    public static final String PARAM_REASON = "reason";
    public static final String PARAM_QUERY = "q";
    public static final String PARAM_LIMIT = "limit";
    public static final String PARAM_NAME = "name";
    public static final String PARAM_EMAIL = "email";
    public static final String PARAM_STREET = "street";
    public static final String PARAM_CITY = "city";
    public static final String PARAM_POSTAL_CODE = "postalCode";
    public static final String PARAM_COUNTRY = "country";
    public static final String PARAM_SKU = "sku";
    public static final String PARAM_CATEGORY = "category";
    public static final String PARAM_PRICE = "price";
    public static final String PARAM_QUANTITY = "quantity";

    // response keys
    public static final String KEY_ERROR = "error";
    public static final String KEY_ERROR_CODE = "code";
    public static final String KEY_ORDER_ID = "orderId";
    public static final String KEY_ORDERS = "orders";
    public static final String KEY_STATUS = "status";
    public static final String KEY_ITEMS = "items";
    public static final String KEY_SUBTOTAL = "subtotal";
    public static final String KEY_TOTAL = "total";
    public static final String KEY_DISCOUNT = "discount";
    public static final String KEY_CUSTOMER_ID = "customerId";
    public static final String KEY_CUSTOMERS = "customers";
    public static final String KEY_PRODUCT_ID = "productId";
    public static final String KEY_PRODUCTS = "products";
    public static final String KEY_STOCK = "stock";
    public static final String KEY_VIP = "vip";

    private ApiKeys() {
    }
}
