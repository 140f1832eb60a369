// Package idempotency makes a mutating HTTP endpoint safe to retry: a client sends an
// Idempotency-Key header, and sending the same key again — after a timeout, a dropped
// connection, a crash of its own — gets the first answer back instead of a second order or a
// second charge. Start here to learn how the shop avoids double charges; docs/idempotency.md
// tells the same story with curl.
//
// # The answers
//
//	no Idempotency-Key header                    400 idempotency_key_required
//	empty, over 255 bytes, not printable ASCII   400 invalid_idempotency_key
//	body the endpoint cannot read                400 invalid_json / invalid_request, nothing reserved
//	first request                                runs; its answer is stored under (tenant, key)
//	same key while the first still runs          409 idempotency_request_in_progress at once, with
//	                                             Retry-After: an estimate of when the answer will
//	                                             exist, at least 1 s (estimate.go)
//	the same, with Prefer: wait=N (RFC 7240)     held up to min(N, 5) s for the first one's answer,
//	                                             then its replay; past that, the 409 (wait.go)
//	same key after completion, same request      the stored status, Content-Type, Location and
//	                                             body byte for byte, Idempotent-Replayed: true
//	same key, another request, endpoint or       422 idempotency_key_reuse, revealing nothing
//	principal of the tenant
//	same key under another tenant                a separate operation
//	the request was too slow and a retry took    409 idempotency_lease_lost + Retry-After: 1
//	its key over
//	the key store is down                        503 service_unavailable, nothing runs
//
// # Three states
//
// A key is absent (no row), in progress (one request holds it with a lease) or completed (its
// answer is stored). Reservation is ONE atomic INSERT … ON CONFLICT DO NOTHING
// (models.IdempotencyStore.Reserve): never "SELECT, then INSERT if missing", which lets two
// requests both run.
//
// The middleware does read the key first — but the read decides only what an existing key
// allows (replay, 409, 422, takeover). An absent key is not written by the middleware: its
// INSERT is the first statement of the operation's first transaction (or, for POST /orders,
// the completing write of the order's only transaction), so the reservation costs no commit
// of its own. Two requests that both read "absent" both start, and the unique index on
// (tenant, key) lets exactly one INSERT commit; the other's transaction rolls back with
// everything it did (models.ErrKeyTaken) and the middleware decides again, finding the
// winner's key: 409 in progress, or the replay. See models.IdempotencyKey. The owner's lease is renewed every lease/3 while its handler works
// (renewer.go); an owner that crashed stops renewing, and after one lease a retry takes the key
// over and resumes from the key's recovery point. Every write of the owner is fenced on its
// lock token, so an owner that wakes up after a takeover can no longer write.
//
// # What the key keeps
//
// When the handler has answered, its answer decides (disposition.go):
//
//	2xx, 402 declined, 409 out_of_stock …   stored and replayed: the outcome of this request
//	409 payment_in_progress                 forgotten: a passing state, not an outcome
//	400, 401, 404, 422, 429                 forgotten: nothing happened; fix the request, keep the key
//	5xx, a panic, a client gone             released with its progress: the outcome may be
//	                                        unknown, so a retry resumes, never starts afresh
//
// A key that made progress (beyond the recovery point "started") is never forgotten, only
// released or completed. The middleware holds back what the handler writes (recorder.go) and
// writes the bytes it stored, so the first answer and every replay are identical.
//
// # What counts as the same request
//
// Each endpoint decides, with the Decoder it is mounted with: a Fingerprint is the SHA-256 of
// a canonical JSON of the endpoint's significant fields, so member order, white space, number
// spelling and free members such as "metadata" do not count. The decoders of the shop's
// endpoints are in package handlers (requests.go).
//
// # Where the key lives
//
// Uniqueness is (tenant, key); the row also records the principal (an API key or a browser
// session) and the endpoint. Both come from the Scope the middleware is built with, so this
// package knows nothing of authentication, and nothing of what the operations do.
package idempotency
