package com.acme.shop.web;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A framework-neutral HTTP response: a status code and a JSON-like body.
 */
public record ApiResponse(int status, Map<String, Object> body) {

    public static final int OK = 200;
    public static final int CREATED = 201;
    public static final int BAD_REQUEST = 400;
    public static final int NOT_FOUND = 404;
    public static final int CONFLICT = 409;
    public static final int SERVER_ERROR = 500;

    public ApiResponse {
        body = Collections.unmodifiableMap(new LinkedHashMap<>(body));
    }

    public static ApiResponse ok(Map<String, Object> body) {
        return new ApiResponse(OK, body);
    }

    public static ApiResponse created(Map<String, Object> body) {
        return new ApiResponse(CREATED, body);
    }

    public static ApiResponse error(int status, String code, String message) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put(ApiKeys.KEY_ERROR_CODE, code);
        body.put(ApiKeys.KEY_ERROR, message);
        return new ApiResponse(status, body);
    }

    public boolean isSuccess() {
        return status < BAD_REQUEST;
    }

    public Object get(String key) {
        return body.get(key);
    }
}
