package chaos

import "sync"

// InBackground runs f over and over in n goroutines until the returned
// halt, which waits for them and may be called more than once. It is for
// the tests of both packages (chaos and chaos_test).
func InBackground(n int, f func()) (halt func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				f()
			}
		})
	}
	return sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
}
