package com.acme.shop.web;

import com.acme.shop.model.Address;
import com.acme.shop.model.Customer;
import com.acme.shop.service.*;

import java.util.List;
import java.util.Map;

/**
 * HTTP endpoints under {@code /api/customers}.
 */
public class CustomerController extends BaseController {

    public static final int DEFAULT_TOP_LIMIT = 10;

    private final CustomerService customerService;

    public CustomerController(CustomerService customerService) {
        this.customerService = customerService;
    }

    @Override
    public String basePath() {
        return ApiKeys.ROUTE_CUSTOMERS;
    }

    public ApiResponse register(Map<String, String> params) {
        return handle(() -> {
            Address address = new Address(
                    requireParam(params, ApiKeys.PARAM_STREET),
                    requireParam(params, ApiKeys.PARAM_CITY),
                    requireParam(params, ApiKeys.PARAM_POSTAL_CODE),
                    optionalParam(params, ApiKeys.PARAM_COUNTRY, Address.HOME_COUNTRY));
            Customer customer = customerService.register(
                    requireParam(params, ApiKeys.PARAM_NAME),
                    requireParam(params, ApiKeys.PARAM_EMAIL),
                    address);
            return ApiResponse.created(toBody(customer));
        });
    }

    public ApiResponse get(Map<String, String> params) {
        return handle(() -> ApiResponse.ok(toBody(customerService.get(requireId(params, ApiKeys.PARAM_ID)))));
    }

    public ApiResponse findByEmail(Map<String, String> params) {
        return handle(() -> {
            String email = requireParam(params, ApiKeys.PARAM_EMAIL);
            return customerService.findByEmail(email)
                    .map(customer -> ApiResponse.ok(toBody(customer)))
                    .orElseGet(() -> ApiResponse.error(ApiResponse.NOT_FOUND, ServiceException.NOT_FOUND,
                            "No customer with e-mail " + email));
        });
    }

    public ApiResponse deactivate(Map<String, String> params) {
        return handle(() -> {
            Long customerId = requireId(params, ApiKeys.PARAM_ID);
            customerService.deactivate(customerId);
            return ApiResponse.ok(fields(ApiKeys.KEY_CUSTOMER_ID, customerId, ApiKeys.KEY_STATUS, "inactive"));
        });
    }

    public ApiResponse top(Map<String, String> params) {
        return handle(() -> {
            int limit = intParam(params, ApiKeys.PARAM_LIMIT, DEFAULT_TOP_LIMIT);
            List<Map<String, Object>> customers = customerService.topCustomers(limit).stream()
                    .map(this::toBody)
                    .toList();
            return ApiResponse.ok(fields(ApiKeys.KEY_CUSTOMERS, customers));
        });
    }

    private Map<String, Object> toBody(Customer customer) {
        return fields(
                ApiKeys.KEY_CUSTOMER_ID, customer.getId(),
                ApiKeys.PARAM_NAME, customer.getName(),
                ApiKeys.PARAM_EMAIL, customer.getEmail(),
                ApiKeys.PARAM_CITY, customer.getAddress().city(),
                ApiKeys.KEY_VIP, customer.isVip());
    }
}
