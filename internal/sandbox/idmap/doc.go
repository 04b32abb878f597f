// Package idmap makes idmapped mounts of image trees: a view of a host
// directory in which the files of uid (and gid) From+N show as owned by
// To+N, without a copy and without writing the tree. Backends use it to
// show the image store's files to a host uid range that does not own them
// (the namespaces backend's sandboxes) or to tools that need the image's
// own owners (the microVM backend's mkfs.erofs).
package idmap
