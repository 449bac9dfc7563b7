// Package c uses the standard library only.
package c

import _ "strings"
