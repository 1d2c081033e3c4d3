package com.acme.shop.service;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * Notifier that "sends" e-mails by appending them to an outbox.
 */
public class EmailNotifier implements Notifier {

    public static final String FROM_ADDRESS = "shop@acme.example";
    private static final Pattern EMAIL = Pattern.compile("^[\\w.+-]+@[\\w-]+(\\.[\\w-]+)+$");

    private final List<Mail> outbox = new ArrayList<>();
    private final String signature;

    public EmailNotifier(String signature) {
        this.signature = signature;
    }

    public EmailNotifier() {
        this("Your ACME Shop team");
    }

    /** One queued e-mail. */
    public record Mail(String from, String to, String subject, String text, Instant queuedAt) {
    }

    @Override
    public boolean send(String recipient, String subject, String body) {
        if (recipient == null || !EMAIL.matcher(recipient).matches()) {
            return false;
        }
        String text = body + "\n\n-- \n" + signature;
        outbox.add(new Mail(FROM_ADDRESS, recipient, subject, text, Instant.now()));
        return true;
    }

    @Override
    public String channel() {
        return "email";
    }

    public List<Mail> getOutbox() {
        return List.copyOf(outbox);
    }

    public List<Mail> sentTo(String recipient) {
        return outbox.stream().filter(mail -> mail.to().equalsIgnoreCase(recipient)).toList();
    }
}
