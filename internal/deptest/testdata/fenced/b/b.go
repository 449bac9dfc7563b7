// Package b links net/http.
package b

import _ "net/http"
