// Package rfrueidis runs redfence's locks over rueidis clients: New is
// redlock.New and NewSingle is single.New, returning the same
// *redlock.Client with the same options, errors and guarantees. It is a
// module of its own, so that go-redis users never download rueidis.
//
// What differs (docs/topologies.md, Clients): give the clients
// DisableCache; rueidis.NewClient fails for a node that is down, so a
// Redlock cannot be made while one is down; Client.Clients returns nil, so
// package coord does not run over these Clients.
package rfrueidis
