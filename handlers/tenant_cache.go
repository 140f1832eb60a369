package handlers

import (
	"context"
	"sync"
	"time"

	"checkoutlab/models"
)

// TenantCacheTTL is how long an API key's tenant is remembered after it was read.
//
// Every API request authenticates, and used to read its tenant by API-key hash: a SELECT per
// request for a row that almost never changes (tenants are seeded; a key is rotated by an
// operator, in the database). The cache keeps what the database said for a short while, so a
// busy client costs one read every TTL instead of one per request. The TTL is the bound on
// staleness: a key revoked in the database stops working within TenantCacheTTL on every shop
// process, without any invalidation protocol between processes. Only found keys are cached:
// an unknown key is looked up every time, so a key added to the database works at once, and
// guessed keys cannot fill the cache.
const TenantCacheTTL = 10 * time.Second

// tenantCacheSize bounds the entries; past it, the cache starts afresh (a shop has a handful
// of tenants and keys, so this only matters if something is wrong).
const tenantCacheSize = 1024

// tenantCache is a TenantFinder that remembers found tenants by API-key hash for ttl.
type tenantCache struct {
	finder TenantFinder
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]cachedTenant
}

type cachedTenant struct {
	tenant  models.Tenant
	expires time.Time
}

func newTenantCache(finder TenantFinder, ttl time.Duration) *tenantCache {
	return &tenantCache{finder: finder, ttl: ttl, now: time.Now, entries: map[string]cachedTenant{}}
}

// ByAPIKey returns the tenant of key, from the cache while its entry is fresh. Each caller
// gets its own copy, so nothing a request does to it reaches another request.
func (c *tenantCache) ByAPIKey(ctx context.Context, key string) (*models.Tenant, error) {
	// Keyed by the hash, as the database is: the cache holds no API key in clear.
	hash := models.HashAPIKey(key)
	c.mu.Lock()
	e, ok := c.entries[hash]
	c.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		t := e.tenant
		return &t, nil
	}
	t, err := c.finder.ByAPIKey(ctx, key)
	if err != nil {
		return nil, err // not cached: unauthorized stays a database question, and so do failures
	}
	c.mu.Lock()
	if len(c.entries) >= tenantCacheSize {
		c.entries = map[string]cachedTenant{}
	}
	c.entries[hash] = cachedTenant{tenant: *t, expires: c.now().Add(c.ttl)}
	c.mu.Unlock()
	copied := *t
	return &copied, nil
}
