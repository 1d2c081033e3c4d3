package com.acme.shop.web;

import com.acme.shop.model.*;
import com.acme.shop.pricing.PriceQuote;
import com.acme.shop.service.OrderService;
import com.acme.shop.service.ServiceException;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * HTTP endpoints under {@code /api/orders}.
 */
public class OrderController extends BaseController {

    public static final String DEFAULT_CANCEL_REASON = "cancelled by customer";

    private final OrderService orderService;

    public OrderController(OrderService orderService) {
        this.orderService = orderService;
    }

    @Override
    public String basePath() {
        return ApiKeys.ROUTE_ORDERS;
    }

    /** POST /api/orders with customerId, items ("productId:quantity,...") and an optional note. */
    public ApiResponse create(Map<String, String> params) {
        return handle(() -> {
            Long customerId = requireId(params, ApiKeys.PARAM_CUSTOMER_ID);
            Map<Long, Integer> quantities = parseItems(requireParam(params, ApiKeys.PARAM_ITEMS));
            String note = optionalParam(params, ApiKeys.PARAM_NOTE, null);
            Order order = orderService.placeOrder(customerId, quantities, note);
            return ApiResponse.created(toBody(order));
        });
    }

    public ApiResponse quote(Map<String, String> params) {
        return handle(() -> {
            PriceQuote quote = orderService.quote(requireId(params, ApiKeys.PARAM_ID));
            return ApiResponse.ok(fields(
                    ApiKeys.KEY_SUBTOTAL, quote.subtotal().format(),
                    ApiKeys.KEY_DISCOUNT, quote.totalDiscount().format(),
                    ApiKeys.KEY_TOTAL, quote.total().format()));
        });
    }

    public ApiResponse pay(Map<String, String> params) {
        return handle(() -> ApiResponse.ok(toBody(orderService.pay(requireId(params, ApiKeys.PARAM_ID)))));
    }

    public ApiResponse ship(Map<String, String> params) {
        return handle(() -> ApiResponse.ok(toBody(orderService.ship(requireId(params, ApiKeys.PARAM_ID)))));
    }

    public ApiResponse cancel(Map<String, String> params) {
        return handle(() -> {
            String reason = optionalParam(params, ApiKeys.PARAM_REASON, DEFAULT_CANCEL_REASON);
            Order order = orderService.cancel(requireId(params, ApiKeys.PARAM_ID), reason);
            return ApiResponse.ok(toBody(order));
        });
    }

    public ApiResponse listForCustomer(Map<String, String> params) {
        return handle(() -> {
            Long customerId = requireId(params, ApiKeys.PARAM_CUSTOMER_ID);
            List<Map<String, Object>> orders = orderService.findOrdersForCustomer(customerId).stream()
                    .map(this::toBody)
                    .toList();
            return ApiResponse.ok(fields(ApiKeys.KEY_CUSTOMER_ID, customerId, ApiKeys.KEY_ORDERS, orders));
        });
    }

    public ApiResponse report() {
        Map<String, Object> counts = new LinkedHashMap<>();
        orderService.statusReport().forEach((status, count) -> counts.put(status.getCode(), count));
        return ApiResponse.ok(counts);
    }

    /** Parses "12:2,15:1" into product id to quantity; repeated products are summed. */
    static Map<Long, Integer> parseItems(String raw) {
        Map<Long, Integer> quantities = new LinkedHashMap<>();
        for (String part : raw.split(",")) {
            String[] pieces = part.split(":");
            if (pieces.length != 2) {
                throw ServiceException.invalid("Malformed item: " + part);
            }
            quantities.merge(Long.valueOf(pieces[0].trim()), Integer.valueOf(pieces[1].trim()), Integer::sum);
        }
        return quantities;
    }

    private Map<String, Object> toBody(Order order) {
        return fields(
                ApiKeys.KEY_ORDER_ID, order.getId(),
                ApiKeys.KEY_STATUS, order.getStatus().getCode(),
                ApiKeys.KEY_ITEMS, order.itemCount(),
                ApiKeys.KEY_SUBTOTAL, order.subtotal().format());
    }
}
