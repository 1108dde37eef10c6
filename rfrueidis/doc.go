// Package rfrueidis runs redfence's locks over rueidis clients
// (github.com/redis/rueidis) instead of go-redis ones: New is redlock.New
// and NewSingle is single.New, returning the same *redlock.Client, with
// the same options, errors and guarantees. It is a module of its own, so
// that go-redis users never download rueidis.
//
// What differs from go-redis (docs/topologies.md, Clients):
//   - Give the clients DisableCache: redfence never reads through the
//     client-side cache, and a server without client tracking refuses it.
//   - rueidis.NewClient dials at once and fails for a node that is down, so
//     a Redlock over rueidis cannot be made while one of its nodes is down
//     (it runs on when one goes down later).
//   - Client.Clients returns nil, so package coord, whose own commands are
//     go-redis calls, does not run over these Clients.
package rfrueidis
