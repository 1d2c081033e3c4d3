package com.acme.shop.service;

import java.util.List;

/**
 * Sends short messages to customers over some channel.
 */
public interface Notifier {

    /**
     * Sends one message.
     *
     * @param recipient an address understood by the channel (e-mail, phone number)
     * @param subject   a short subject line
     * @param body      the message text
     * @return true if the message was accepted for delivery
     */
    boolean send(String recipient, String subject, String body);

    /** Name of the channel, e.g. "email" or "sms". */
    String channel();

    default int sendAll(List<String> recipients, String subject, String body) {
        int accepted = 0;
        for (String recipient : recipients) {
            if (send(recipient, subject, body)) {
                accepted++;
            }
        }
        return accepted;
    }

    /** A notifier that drops every message, useful in tests. */
    static Notifier silent() {
        return new Notifier() {
            @Override
            public boolean send(String recipient, String subject, String body) {
                return true;
            }

            @Override
            public String channel() {
                return "none";
            }
        };
    }
}
