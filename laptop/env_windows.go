package laptop

import "golang.org/x/sys/windows"

// ProfileDir is the user's profile directory from this process's token,
// which Windows knows even when the environment does not say it.
func ProfileDir() string {
	dir, err := windows.GetCurrentProcessToken().GetUserProfileDirectory()
	if err != nil {
		return ""
	}
	return dir
}
