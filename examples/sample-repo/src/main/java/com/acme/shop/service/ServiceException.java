package com.acme.shop.service;

/**
 * Raised by services when a request cannot be fulfilled.
 * The code is mapped to an HTTP status by the web layer.
 */
public class ServiceException extends RuntimeException {

    public static final String NOT_FOUND = "not_found";
    public static final String INVALID = "invalid";
    public static final String CONFLICT = "conflict";

    private static final long serialVersionUID = 1L;

    private final String code;

    public ServiceException(String code, String message) {
        super(message);
        this.code = code;
    }

    public static ServiceException notFound(String what, Long id) {
        return new ServiceException(NOT_FOUND, what + " " + id + " does not exist");
    }

    public static ServiceException invalid(String message) {
        return new ServiceException(INVALID, message);
    }

    public static ServiceException conflict(String message) {
        return new ServiceException(CONFLICT, message);
    }

    public String getCode() {
        return code;
    }
}
