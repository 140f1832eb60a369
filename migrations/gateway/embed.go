// Package gateway holds the fake payment gateway's SQL migrations, one folder per dialect
// (postgres, sqlite) with the same version numbers in both, embedded so that the gateway
// binary carries its own schema. The fake gateway applies them itself (fakegateway.Migrate);
// nothing of the shop is involved.
package gateway

import "embed"

// FS holds postgres/*.sql and sqlite/*.sql.
//
//go:embed postgres/*.sql sqlite/*.sql
var FS embed.FS
