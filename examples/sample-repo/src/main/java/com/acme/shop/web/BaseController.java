package com.acme.shop.web;

import com.acme.shop.service.ServiceException;
import com.acme.shop.util.TextUtil;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Common request handling for controllers: parameter parsing and error mapping.
 */
public abstract class BaseController {

    /** The route prefix, one of the ROUTE_ constants in {@link ApiKeys}. */
    public abstract String basePath();

    public String route(String suffix) {
        return basePath() + "/" + suffix;
    }

    protected String requireParam(Map<String, String> params, String key) {
        String value = params.get(key);
        if (TextUtil.isBlank(value)) {
            throw ServiceException.invalid("Missing parameter: " + key);
        }
        return value.trim();
    }

    protected String optionalParam(Map<String, String> params, String key, String defaultValue) {
        String value = params.get(key);
        return TextUtil.isBlank(value) ? defaultValue : value.trim();
    }

    protected Long requireId(Map<String, String> params, String key) {
        String raw = requireParam(params, key);
        try {
            return Long.valueOf(raw);
        } catch (NumberFormatException e) {
            throw ServiceException.invalid(key + " must be a number: " + raw);
        }
    }

    protected int intParam(Map<String, String> params, String key, int defaultValue) {
        String raw = optionalParam(params, key, null);
        return raw == null ? defaultValue : Integer.parseInt(raw);
    }

    /** Runs the action and turns exceptions into error responses. */
    protected ApiResponse handle(Supplier<ApiResponse> action) {
        try {
            return action.get();
        } catch (ServiceException e) {
            return ApiResponse.error(statusFor(e.getCode()), e.getCode(), e.getMessage());
        } catch (IllegalArgumentException | IllegalStateException e) {
            return ApiResponse.error(ApiResponse.BAD_REQUEST, ServiceException.INVALID, e.getMessage());
        }
    }

    protected int statusFor(String code) {
        return switch (code) {
            case ServiceException.NOT_FOUND -> ApiResponse.NOT_FOUND;
            case ServiceException.CONFLICT -> ApiResponse.CONFLICT;
            case ServiceException.INVALID -> ApiResponse.BAD_REQUEST;
            default -> ApiResponse.SERVER_ERROR;
        };
    }

    /** Builds an ordered body from alternating keys and values. */
    protected Map<String, Object> fields(Object... keysAndValues) {
        Map<String, Object> body = new LinkedHashMap<>();
        for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
            body.put(String.valueOf(keysAndValues[i]), keysAndValues[i + 1]);
        }
        return body;
    }
}
