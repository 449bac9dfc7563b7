package transport

import "testing"

func TestBatchLen(t *testing.T) {
	for body, want := range map[string]int{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`: 1,
		` [ ] `:                           1,
		`[{"a":[1,2,3]}]`:                 1,
		`[{"a":"x,y]"},{"b":"\"],"}, {}]`: 3,
		"\n[1,2,3,4,5,6,7,8,9,10]":        5, // counted up to 5
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{}`: 2,
		`not json, at all`: 1,
		`[{"x":{"y":[{"z":1},{"z":2}]}},{"x":"\\"},{"q":1}]`: 3,
	} {
		if got := batchLen([]byte(body), 5); got != want {
			t.Errorf("batchLen(%s) = %d, want %d", body, got, want)
		}
	}
}
