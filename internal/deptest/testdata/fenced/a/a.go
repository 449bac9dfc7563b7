// Package a reaches net/http only through b: the checker must see it.
package a

import _ "example.com/fenced/b"
