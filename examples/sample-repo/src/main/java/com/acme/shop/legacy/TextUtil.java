package com.acme.shop.util;

import java.text.Normalizer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Small string helpers shared by all layers.
 */
public final class TextUtil {

    public static final String ELLIPSIS = "...";
    private static final String NON_ALPHANUMERIC = "[^a-z0-9]+";

    private TextUtil() {
    }

    public static boolean isBlank(String value) {
        return value == null || value.trim().isEmpty();
    }

    /** Lower-cases, strips accents and collapses whitespace. */
    public static String normalize(String value) {
        if (value == null) {
            return "";
        }
        String stripped = Normalizer.normalize(value, Normalizer.Form.NFD).replaceAll("\\p{M}", "");
        return stripped.toLowerCase(Locale.ROOT).trim().replaceAll("\\s+", " ");
    }

    public static String truncate(String value, int maxLength) {
        if (value == null || value.length() <= maxLength) {
            return value;
        }
        return value.substring(0, Math.max(0, maxLength - ELLIPSIS.length())) + ELLIPSIS;
    }

    public static String capitalize(String value) {
        if (isBlank(value)) {
            return value;
        }
        return Character.toUpperCase(value.charAt(0)) + value.substring(1);
    }

    /** Turns "Winter Sale 2024!" into "winter-sale-2024". */
    public static String slugify(String value) {
        String slug = normalize(value).replaceAll(NON_ALPHANUMERIC, "-");
        return slug.replaceAll("^-|-$", "");
    }

    /** Splits identifiers such as "OrderService" or "order_service" into words. */
    public static List<String> splitWords(String identifier) {
        List<String> words = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        for (char c : identifier.toCharArray()) {
            if (c == '_' || c == '-' || Character.isWhitespace(c)) {
                flush(words, current);
            } else if (Character.isUpperCase(c) && current.length() > 0) {
                flush(words, current);
                current.append(Character.toLowerCase(c));
            } else {
                current.append(Character.toLowerCase(c));
            }
        }
        flush(words, current);
        return words;
    }

    private static void flush(List<String> words, StringBuilder current) {
        if (current.length() > 0) {
            words.add(current.toString());
            current.setLength(0);
        }
    }
}
