// Checkout Lab browser scripts live here.
