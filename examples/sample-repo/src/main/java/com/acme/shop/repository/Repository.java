package com.acme.shop.repository;

import java.util.List;
import java.util.Optional;

/**
 * Minimal storage contract for domain objects.
 *
 * @param <T> the stored type
 */
public interface Repository<T> {

    /** Stores the item, assigning an id when it has none yet. */
    T save(T item);

    Optional<T> findById(Long id);

    List<T> findAll();

    boolean deleteById(Long id);

    long count();

    default boolean existsById(Long id) {
        return findById(id).isPresent();
    }

    default List<T> saveAll(List<T> items) {
        return items.stream().map(this::save).toList();
    }

    default boolean isEmpty() {
        return count() == 0;
    }
}
