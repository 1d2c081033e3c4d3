package com.acme.shop.service;

import com.acme.shop.model.Customer;
import com.acme.shop.model.Entity;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Shared plumbing for services: auditing, notifications and argument checks.
 */
public abstract class BaseService {

    /** Format of audit entries: time, action, entity. */
    public static final String AUDIT_FORMAT = "%s %-8s %s";

    private final Notifier notifier;
    private final List<String> auditLog = new ArrayList<>();

    protected BaseService(Notifier notifier) {
        this.notifier = notifier == null ? Notifier.silent() : notifier;
    }

    protected void audit(String action, Entity entity) {
        auditLog.add(String.format(AUDIT_FORMAT, Instant.now(), action, entity));
    }

    public List<String> getAuditLog() {
        return List.copyOf(auditLog);
    }

    /** Sends a message to the customer; failures are recorded in the audit log. */
    protected void notifyCustomer(Customer customer, String subject, String body) {
        boolean accepted = notifier.send(customer.getEmail(), subject, "Hello " + customer.getName() + ",\n\n" + body);
        if (!accepted) {
            audit("NOTIFY!", customer);
        }
    }

    protected <T> T require(Optional<T> value, String what, Long id) {
        return value.orElseThrow(() -> ServiceException.notFound(what, id));
    }

    protected void check(boolean condition, String message) {
        if (!condition) {
            throw ServiceException.invalid(message);
        }
    }

    protected String channel() {
        return notifier.channel();
    }
}
