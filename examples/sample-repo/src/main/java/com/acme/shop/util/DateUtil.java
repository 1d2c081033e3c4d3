package com.acme.shop.util;

import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;

/**
 * Date and time helpers. All calculations use the shop's time zone.
 */
public final class DateUtil {

    public static final ZoneId SHOP_ZONE = ZoneId.of("Europe/Berlin");
    public static final String DATE_PATTERN = "yyyy-MM-dd";
    public static final String DATE_TIME_PATTERN = "yyyy-MM-dd HH:mm";

    private static final DateTimeFormatter DATE_FORMAT = DateTimeFormatter.ofPattern(DATE_PATTERN);
    private static final DateTimeFormatter DATE_TIME_FORMAT = DateTimeFormatter.ofPattern(DATE_TIME_PATTERN);

    private DateUtil() {
    }

    public static String formatDate(Instant instant) {
        return DATE_FORMAT.format(instant.atZone(SHOP_ZONE));
    }

    public static String formatDateTime(Instant instant) {
        return DATE_TIME_FORMAT.format(instant.atZone(SHOP_ZONE));
    }

    public static LocalDate parseDate(String text) {
        return LocalDate.parse(text, DATE_FORMAT);
    }

    public static Instant startOfDay(LocalDate date) {
        return date.atStartOfDay(SHOP_ZONE).toInstant();
    }

    public static Instant endOfDay(LocalDate date) {
        return startOfDay(date.plusDays(1)).minusMillis(1);
    }

    /** True if the instant lies in [from, to], both ends inclusive. */
    public static boolean isWithin(Instant instant, Instant from, Instant to) {
        return !instant.isBefore(from) && !instant.isAfter(to);
    }

    public static long daysBetween(Instant from, Instant to) {
        return Duration.between(from, to).toDays();
    }
}
