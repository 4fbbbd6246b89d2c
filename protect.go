package countersign

// SystemProtected are the paths protected on every host: the system's own
// trees and the usual places of served sites and databases. The rm
// wrapper's policy starts with them, and the server judges an approver's
// edit of an action by them.
var SystemProtected = [...]string{
	"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/opt",
	"/root", "/sbin", "/srv", "/usr", "/var/lib", "/var/www",
}

// HomeProtected are the directories of credentials and configuration
// protected inside a home directory.
var HomeProtected = [...]string{".ssh", ".gnupg", ".aws", ".kube", ".config"}
