module example.com/fenced

go 1.25
