package com.acme.shop.repository;

import com.acme.shop.model.Entity;
import com.acme.shop.util.IdGenerator;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * In-memory repository that keeps entities in insertion order.
 * Subclasses add finder methods built on {@link #findWhere(Predicate)}.
 *
 * @param <T> the entity type
 */
public abstract class AbstractRepository<T extends Entity> implements Repository<T> {

    private final Map<Long, T> store = new LinkedHashMap<>();
    private final IdGenerator idGenerator;

    protected AbstractRepository(IdGenerator idGenerator) {
        this.idGenerator = idGenerator;
    }

    protected AbstractRepository() {
        this(IdGenerator.shared());
    }

    /** Name used in error messages, e.g. "Order". */
    protected abstract String entityName();

    @Override
    public T save(T item) {
        if (item.isNew()) {
            item.setId(idGenerator.nextId());
        } else {
            idGenerator.advancePast(item.getId());
        }
        store.put(item.getId(), item);
        return item;
    }

    @Override
    public Optional<T> findById(Long id) {
        return Optional.ofNullable(store.get(id));
    }

    /** Like {@link #findById(Long)} but fails when the entity is missing. */
    public T getOrThrow(Long id) {
        return findById(id).orElseThrow(
                () -> new NoSuchElementException(entityName() + " not found: " + id));
    }

    @Override
    public List<T> findAll() {
        return new ArrayList<>(store.values());
    }

    @Override
    public boolean deleteById(Long id) {
        return store.remove(id) != null;
    }

    @Override
    public long count() {
        return store.size();
    }

    /** Removes every entity; mostly useful in tests. */
    public void clear() {
        store.clear();
    }

    protected List<T> findWhere(Predicate<T> condition) {
        return store.values().stream().filter(condition).toList();
    }

    protected Optional<T> findFirstWhere(Predicate<T> condition) {
        return store.values().stream().filter(condition).findFirst();
    }

    protected List<T> findWhereSorted(Predicate<T> condition, Comparator<T> order) {
        return store.values().stream().filter(condition).sorted(order).toList();
    }

    protected long countWhere(Predicate<T> condition) {
        return store.values().stream().filter(condition).count();
    }
}
