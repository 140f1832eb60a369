// Package static embeds the shop's CSS, JavaScript and images. Third-party files carry their
// npm package name and version in their file name or first line.
package static

import "embed"

// FS holds css/, js/ and img/.
//
//go:embed css js img
var FS embed.FS
