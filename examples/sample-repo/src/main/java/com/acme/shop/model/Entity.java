package com.acme.shop.model;

import java.time.Instant;
import java.util.Objects;

/**
 * Base class for every persisted domain object of the shop.
 *
 * <p>Subclasses must call {@link #touch()} whenever they change state so that
 * {@link #getUpdatedAt()} stays accurate.
 */
public abstract class Entity {

    private Long id;
    private final Instant createdAt;
    private Instant updatedAt;

    protected Entity() {
        this.createdAt = Instant.now();
        this.updatedAt = this.createdAt;
    }

    public Long getId() {
        return id;
    }

    public void setId(Long id) {
        this.id = id;
    }

    /** Returns true until a repository has assigned an id. */
    public boolean isNew() {
        return id == null;
    }

    public Instant getCreatedAt() {
        return createdAt;
    }

    public Instant getUpdatedAt() {
        return updatedAt;
    }

    /** Records a modification; called by subclasses from their mutators. */
    protected void touch() {
        this.updatedAt = Instant.now();
    }

    protected static String requireText(String value, String field) {
        if (value == null || value.isBlank()) {
            throw new IllegalArgumentException(field + " must not be blank");
        }
        return value.trim();
    }

    protected static <T> T requireValue(T value, String field) {
        return Objects.requireNonNull(value, field + " must not be null");
    }

    /** A short human readable label used in logs and notifications. */
    public abstract String displayName();

    @Override
    public boolean equals(Object other) {
        if (this == other) {
            return true;
        }
        if (other == null || getClass() != other.getClass()) {
            return false;
        }
        Entity that = (Entity) other;
        return id != null && id.equals(that.id);
    }

    @Override
    public int hashCode() {
        return Objects.hash(getClass(), id);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "#" + (id == null ? "new" : id);
    }
}
