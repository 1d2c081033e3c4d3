package com.acme.shop.model;

/**
 * A registered shop customer.
 */
public class Customer extends Entity {

    /** Customers with at least this many points get VIP discounts. */
    public static final int VIP_THRESHOLD = 1000;

    private String name;
    private String email;
    private Address address;
    private int loyaltyPoints;
    private boolean active = true;

    public Customer(String name, String email, Address address) {
        this.name = requireText(name, "name");
        this.email = requireText(email, "email").toLowerCase();
        this.address = requireValue(address, "address");
    }

    public String getName() {
        return name;
    }

    public void rename(String newName) {
        this.name = requireText(newName, "name");
        touch();
    }

    public String getEmail() {
        return email;
    }

    public void changeEmail(String newEmail) {
        this.email = requireText(newEmail, "email").toLowerCase();
        touch();
    }

    public Address getAddress() {
        return address;
    }

    public void moveTo(Address newAddress) {
        this.address = requireValue(newAddress, "address");
        touch();
    }

    public int getLoyaltyPoints() {
        return loyaltyPoints;
    }

    public void addLoyaltyPoints(int points) {
        if (points < 0) {
            throw new IllegalArgumentException("points must be positive: " + points);
        }
        this.loyaltyPoints += points;
        touch();
    }

    public boolean isVip() {
        return loyaltyPoints >= VIP_THRESHOLD;
    }

    public boolean isActive() {
        return active;
    }

    public void deactivate() {
        this.active = false;
        touch();
    }

    @Override
    public String displayName() {
        return name + " <" + email + ">";
    }
}
