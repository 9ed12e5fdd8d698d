//! The framework's services by type: which contracts and classes send mail, make HTTP
//! calls, write to a cache, a disk or Redis, push jobs, fire events or send notifications,
//! whether they come as a facade, an injected constructor or property type, `app(X::class)`,
//! `app('mailer')` or a value a helper returns. An effect is found by the receiver's type,
//! never by a variable's name (issue 39: an application that sends through an injected
//! `Illuminate\Mail\Mailer` in 12 classes and never uses the `Mail` facade).

use super::effects::{Effect, facade};
use super::{Analysis, Frame};
use crate::ir::Call;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Service {
    Mail,
    Http,
    Cache,
    Storage,
    Redis,
    Log,
    Queue,
    Bus,
    Events,
    Notifications,
    Db,
}

/// Framework types (interfaces and classes) and the service each is.
const TYPES: [(&str, Service); 45] = [
    ("Illuminate\\Contracts\\Mail\\Mailer", Service::Mail),
    ("Illuminate\\Contracts\\Mail\\Factory", Service::Mail),
    ("Illuminate\\Contracts\\Mail\\MailQueue", Service::Mail),
    ("Illuminate\\Mail\\Mailer", Service::Mail),
    ("Illuminate\\Mail\\MailManager", Service::Mail),
    ("Illuminate\\Mail\\PendingMail", Service::Mail),
    ("Illuminate\\Http\\Client\\Factory", Service::Http),
    ("Illuminate\\Http\\Client\\PendingRequest", Service::Http),
    ("GuzzleHttp\\Client", Service::Http),
    ("GuzzleHttp\\ClientInterface", Service::Http),
    ("Psr\\Http\\Client\\ClientInterface", Service::Http),
    ("Illuminate\\Contracts\\Cache\\Repository", Service::Cache),
    ("Illuminate\\Contracts\\Cache\\Factory", Service::Cache),
    ("Illuminate\\Cache\\Repository", Service::Cache),
    ("Illuminate\\Cache\\CacheManager", Service::Cache),
    ("Psr\\SimpleCache\\CacheInterface", Service::Cache),
    ("Illuminate\\Contracts\\Filesystem\\Filesystem", Service::Storage),
    ("Illuminate\\Contracts\\Filesystem\\Factory", Service::Storage),
    ("Illuminate\\Contracts\\Filesystem\\Cloud", Service::Storage),
    ("Illuminate\\Filesystem\\FilesystemManager", Service::Storage),
    ("Illuminate\\Filesystem\\FilesystemAdapter", Service::Storage),
    ("Illuminate\\Filesystem\\Filesystem", Service::Storage),
    ("League\\Flysystem\\FilesystemOperator", Service::Storage),
    ("League\\Flysystem\\Filesystem", Service::Storage),
    ("Illuminate\\Contracts\\Redis\\Factory", Service::Redis),
    ("Illuminate\\Redis\\RedisManager", Service::Redis),
    ("Illuminate\\Redis\\Connections\\Connection", Service::Redis),
    ("Psr\\Log\\LoggerInterface", Service::Log),
    ("Illuminate\\Log\\Logger", Service::Log),
    ("Illuminate\\Log\\LogManager", Service::Log),
    ("Illuminate\\Contracts\\Queue\\Queue", Service::Queue),
    ("Illuminate\\Contracts\\Queue\\Factory", Service::Queue),
    ("Illuminate\\Queue\\QueueManager", Service::Queue),
    ("Illuminate\\Contracts\\Bus\\Dispatcher", Service::Bus),
    ("Illuminate\\Contracts\\Bus\\QueueingDispatcher", Service::Bus),
    ("Illuminate\\Bus\\Dispatcher", Service::Bus),
    ("Illuminate\\Contracts\\Events\\Dispatcher", Service::Events),
    ("Illuminate\\Events\\Dispatcher", Service::Events),
    ("Illuminate\\Contracts\\Notifications\\Dispatcher", Service::Notifications),
    ("Illuminate\\Contracts\\Notifications\\Factory", Service::Notifications),
    ("Illuminate\\Notifications\\ChannelManager", Service::Notifications),
    ("Illuminate\\Database\\DatabaseManager", Service::Db),
    ("Illuminate\\Database\\ConnectionInterface", Service::Db),
    ("Illuminate\\Database\\Connection", Service::Db),
    ("Illuminate\\Database\\ConnectionResolverInterface", Service::Db),
];

/// Facades and the type they stand for.
const FACADES: [(&str, &str); 12] = [
    ("Mail", "Illuminate\\Mail\\MailManager"),
    ("Http", "Illuminate\\Http\\Client\\PendingRequest"),
    ("Cache", "Illuminate\\Cache\\CacheManager"),
    ("Storage", "Illuminate\\Filesystem\\FilesystemManager"),
    ("File", "Illuminate\\Filesystem\\Filesystem"),
    ("Redis", "Illuminate\\Redis\\RedisManager"),
    ("Log", "Illuminate\\Log\\LogManager"),
    ("Queue", "Illuminate\\Queue\\QueueManager"),
    ("Bus", "Illuminate\\Bus\\Dispatcher"),
    ("Event", "Illuminate\\Events\\Dispatcher"),
    ("Notification", "Illuminate\\Notifications\\ChannelManager"),
    ("DB", "Illuminate\\Database\\DatabaseManager"),
];

/// Container bindings by name (`app('mailer')`) and the type each resolves to.
const BINDINGS: [(&str, &str); 13] = [
    ("mailer", "Illuminate\\Mail\\Mailer"),
    ("mail.manager", "Illuminate\\Mail\\MailManager"),
    ("cache", "Illuminate\\Cache\\CacheManager"),
    ("cache.store", "Illuminate\\Cache\\Repository"),
    ("filesystem", "Illuminate\\Filesystem\\FilesystemManager"),
    ("filesystem.disk", "Illuminate\\Filesystem\\FilesystemAdapter"),
    ("files", "Illuminate\\Filesystem\\Filesystem"),
    ("redis", "Illuminate\\Redis\\RedisManager"),
    ("log", "Illuminate\\Log\\LogManager"),
    ("queue", "Illuminate\\Queue\\QueueManager"),
    ("events", "Illuminate\\Events\\Dispatcher"),
    ("db", "Illuminate\\Database\\DatabaseManager"),
    ("db.connection", "Illuminate\\Database\\Connection"),
];

/// The helpers that return a service (`app('…')` is in `BINDINGS`).
const HELPERS: [(&str, &str); 2] =
    [("cache", "Illuminate\\Cache\\CacheManager"), ("logger", "Illuminate\\Log\\LogManager")];

pub(super) fn facade_type(class: &str) -> Option<&'static str> {
    FACADES.iter().find(|(f, _)| facade(class, f)).map(|(_, t)| *t)
}

pub(super) fn binding_type(name: &str) -> Option<&'static str> {
    BINDINGS.iter().find(|(b, _)| b.eq_ignore_ascii_case(name)).map(|(_, t)| *t)
}

pub(super) fn helper_type(function: &str) -> Option<&'static str> {
    let function = function.trim_start_matches('\\');
    HELPERS.iter().find(|(h, _)| h.eq_ignore_ascii_case(function)).map(|(_, t)| *t)
}

fn direct(t: &str) -> Option<Service> {
    let t = t.trim_start_matches('\\');
    TYPES.iter().find(|(name, _)| name.eq_ignore_ascii_case(t)).map(|(_, s)| *s)
}

impl<'a> Analysis<'a> {
    /// The service a value of one of `types` is: a framework type, or a class in the
    /// tree that extends or implements one.
    pub(super) fn service_of(&self, types: &[String]) -> Option<Service> {
        for t in types {
            if let Some(s) = direct(t) {
                return Some(s);
            }
            for c in self.index.lineage(t) {
                for parent in c.class.extends.iter().chain(&c.class.implements) {
                    if let Some(s) = direct(parent) {
                        return Some(s);
                    }
                }
            }
        }
        None
    }

    /// An effect of a method call on a value whose type is a service: the receiver is
    /// the outermost call's object (`$this->mailer->to($u)->send(…)`, `$this->http()
    /// ->post(…)`, `app(Mailer::class)->send(…)`). A method that a class of the tree
    /// defines itself is its own, not the framework's, and is followed instead.
    pub(super) fn typed_effect(
        &self,
        chain: &[&'a Call],
        frame: &Frame<'a>,
        modifiers: &dyn Fn(Option<&str>) -> bool,
    ) -> Option<Effect> {
        let outer = chain[0];
        let crate::ir::Callee::Method { object, name } = &outer.callee else { return None };
        // Only a name some service has an effect under is looked at by type: the walk
        // stays cheap on trees of thousands of files.
        if !super::effects::effect_name(name) {
            return None;
        }
        let types = self.types_of(object, frame);
        if types.iter().any(|t| self.index.method(t, name).is_some()) {
            return None;
        }
        let service = self.service_of(&types)?;
        self.service_effect(service, outer, name, frame, modifiers, None)
    }
}
