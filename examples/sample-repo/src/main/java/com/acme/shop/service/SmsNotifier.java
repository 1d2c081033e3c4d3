package com.acme.shop.service;

import com.acme.shop.util.TextUtil;

import java.util.ArrayList;
import java.util.List;

/**
 * Notifier for text messages. Messages are cut to {@link #MAX_LENGTH} characters.
 */
public class SmsNotifier implements Notifier {

    public static final int MAX_LENGTH = 160;
    private static final String PHONE_PATTERN = "\\+?[0-9 ]{6,20}";

    private final List<String> sent = new ArrayList<>();

    @Override
    public boolean send(String recipient, String subject, String body) {
        if (recipient == null || !recipient.matches(PHONE_PATTERN)) {
            return false;
        }
        String text = TextUtil.truncate(subject + ": " + body, MAX_LENGTH);
        sent.add(recipient.replace(" ", "") + " " + text);
        return true;
    }

    @Override
    public String channel() {
        return "sms";
    }

    public List<String> getSent() {
        return List.copyOf(sent);
    }

    public int sentCount() {
        return sent.size();
    }
}
