package com.acme.shop.model;

import java.util.Locale;

/**
 * A postal address. Country codes are two-letter ISO codes.
 */
public record Address(String street, String city, String postalCode, String countryCode) {

    public static final String HOME_COUNTRY = "DE";

    public Address {
        if (street == null || street.isBlank()) {
            throw new IllegalArgumentException("street must not be blank");
        }
        if (city == null || city.isBlank()) {
            throw new IllegalArgumentException("city must not be blank");
        }
        if (postalCode == null || !postalCode.matches("[0-9A-Z -]{3,10}")) {
            throw new IllegalArgumentException("invalid postal code: " + postalCode);
        }
        countryCode = countryCode == null ? HOME_COUNTRY : countryCode.toUpperCase(Locale.ROOT);
    }

    public static Address domestic(String street, String city, String postalCode) {
        return new Address(street, city, postalCode, HOME_COUNTRY);
    }

    public boolean isDomestic() {
        return HOME_COUNTRY.equals(countryCode);
    }

    public Address withCity(String newCity, String newPostalCode) {
        return new Address(street, newCity, newPostalCode, countryCode);
    }

    /** Formats the address on a single line, e.g. for SMS messages. */
    public String format() {
        return street + ", " + postalCode + " " + city + " (" + countryCode + ")";
    }
}
