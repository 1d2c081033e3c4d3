package com.acme.shop.util;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Hands out increasing numeric ids, one sequence per generator.
 */
public class IdGenerator {

    public static final long FIRST_ID = 1000L;

    private static final IdGenerator SHARED = new IdGenerator(FIRST_ID);

    private final AtomicLong next;

    public IdGenerator(long start) {
        if (start < 0) {
            throw new IllegalArgumentException("start must not be negative");
        }
        this.next = new AtomicLong(start);
    }

    public static IdGenerator shared() {
        return SHARED;
    }

    public long nextId() {
        return next.getAndIncrement();
    }

    /** Returns the id the next call to {@link #nextId()} will produce. */
    public long peek() {
        return next.get();
    }

    /** Makes sure later ids are greater than an id that was loaded from elsewhere. */
    public void advancePast(long usedId) {
        next.accumulateAndGet(usedId + 1, Math::max);
    }

    public String nextReference(String prefix) {
        return prefix + "-" + nextId();
    }
}
