package bearer

import "syscall"

func mtimeNano(st *syscall.Stat_t) int64 { return st.Mtimespec.Nano() }
func ctimeNano(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
